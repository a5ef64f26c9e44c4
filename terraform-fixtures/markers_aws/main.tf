# Live markers through the provider door: the real hashicorp/aws provider (a filesystem
# mirror) against moto, one client-named and two server-named objects.
terraform {
  backend "http" {}
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "5.100.0"
    }
  }
}

variable "endpoint" {
  type = string
}

variable "prefix" {
  type = string
}

# Which of the three objects the root holds: "p" (ssm parameter), "b" (bucket), "r" (role).
variable "objects" {
  type    = set(string)
  default = ["p", "b", "r"]
}

provider "aws" {
  region                      = "us-east-1"
  access_key                  = "testing"
  secret_key                  = "testing"
  skip_credentials_validation = true
  skip_metadata_api_check     = true
  skip_requesting_account_id  = true
  s3_use_path_style           = true
  endpoints {
    ssm                      = var.endpoint
    s3                       = var.endpoint
    iam                      = var.endpoint
    sts                      = var.endpoint
    resourcegroupstaggingapi = var.endpoint
  }
  # The user's own: the door's markers join them, never replace them.
  default_tags {
    tags = {
      owner = "tests"
    }
  }
  ignore_tags {
    keys = ["ignored-by-user"]
  }
}

resource "aws_ssm_parameter" "p" {
  for_each = setintersection(var.objects, ["p"])
  name     = "/${var.prefix}/p"
  type     = "String"
  value    = "one"
  tags = {
    team = "db"
  }
}

resource "aws_s3_bucket" "b" {
  for_each      = setintersection(var.objects, ["b"])
  bucket_prefix = "${var.prefix}-"
}

resource "aws_iam_role" "r" {
  for_each    = setintersection(var.objects, ["r"])
  name_prefix = "${var.prefix}-"
  assume_role_policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Action    = "sts:AssumeRole"
      Principal = { Service = "ec2.amazonaws.com" }
    }]
  })
}
