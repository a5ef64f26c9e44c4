# Records at each provider return with the real hashicorp/aws provider (protocol 5): an SSM
# parameter p1, then a thing of the project's own provider whose create sleeps `wait_ms`, then p2.
# A kill during the sleep finds p1 made and p2 not.
terraform {
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "5.100.0"
    }
    cdftest = {
      source  = "choudoufu/cdftest"
      version = "0.1.0"
    }
  }
}

variable "endpoint" {
  type = string
}

variable "prefix" {
  type = string
}

variable "wait_ms" {
  type    = number
  default = 0
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

resource "aws_ssm_parameter" "p1" {
  name           = "/${var.prefix}/p1"
  type           = "String"
  insecure_value = "one"
}

resource "cdftest_thing" "wait" {
  name       = "wait"
  value      = "w"
  sleep_ms   = var.wait_ms
  depends_on = [aws_ssm_parameter.p1]
}

resource "aws_ssm_parameter" "p2" {
  name           = "/${var.prefix}/p2"
  type           = "String"
  insecure_value = "two"
  depends_on     = [cdftest_thing.wait]
}
