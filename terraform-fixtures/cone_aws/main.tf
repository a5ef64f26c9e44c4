# The change cone's root (`run --refresh=cone`): the real hashicorp/aws provider (a filesystem
# mirror) against moto. p[i] holds values[i]; d reads p[0], so p[0] is d's dependency and d is
# p[0]'s dependent.
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

variable "values" {
  type = list(string)
}

provider "aws" {
  region                      = "us-east-1"
  access_key                  = "testing"
  secret_key                  = "testing"
  skip_credentials_validation = true
  skip_metadata_api_check     = true
  skip_requesting_account_id  = true
  endpoints {
    ssm = var.endpoint
  }
}

resource "aws_ssm_parameter" "p" {
  count          = length(var.values)
  name           = "/${var.prefix}/p${count.index}"
  type           = "String"
  insecure_value = var.values[count.index]
}

resource "aws_ssm_parameter" "d" {
  name           = "/${var.prefix}/d"
  type           = "String"
  insecure_value = "${aws_ssm_parameter.p[0].insecure_value}-d"
}
