# Live markers through the provider door: the real hashicorp/aws provider (a filesystem
# mirror) against moto, client-named and server-named objects, and the default VPC.
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

# Which objects the root holds, by key: "p..." (ssm parameters), "b" (bucket), "r..." (roles),
# "v" (the region's default VPC, adopted).
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
    ec2                      = var.endpoint
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
  for_each = toset([for o in var.objects : o if startswith(o, "p")])
  name     = "/${var.prefix}/${each.key}"
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
  for_each    = toset([for o in var.objects : o if startswith(o, "r")])
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

# An aws_default_* type: its create adopts the object that exists and tags it.
resource "aws_default_vpc" "v" {
  for_each = setintersection(var.objects, ["v"])
}

# A plugin-framework type: its create answers with the planned `tags`, so the door's markers
# come back in the answer unless the door takes them out. On the default VPC's default group.
locals {
  rules = toset([for o in var.objects : o if startswith(o, "i")])
}

data "aws_vpc" "default" {
  count   = length(local.rules) > 0 ? 1 : 0
  default = true
}

data "aws_security_group" "default" {
  count  = length(local.rules) > 0 ? 1 : 0
  vpc_id = data.aws_vpc.default[0].id
  name   = "default"
}

resource "aws_vpc_security_group_ingress_rule" "i" {
  for_each          = local.rules
  security_group_id = data.aws_security_group.default[0].id
  cidr_ipv4         = "10.0.0.0/8"
  ip_protocol       = "tcp"
  # A port of its own per prefix and key: the default group outlives each test's objects.
  from_port = 1024 + parseint(substr(sha1("${var.prefix}/${each.key}"), 0, 4), 16) % 60000
  to_port   = 1024 + parseint(substr(sha1("${var.prefix}/${each.key}"), 0, 4), 16) % 60000
  tags = {
    team = "net"
  }
}
