# Two stages of SSM parameters with the real hashicorp/aws provider (protocol 5): two a[*]
# created together, then a thing of the project's own provider whose create sleeps `wait_ms`,
# then two more b[*] created together. A kill during the sleep finds a[*] made and b[*] not
# (the saved plan resumed); a plugin killed as b[*] go out finds their calls in flight.
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
    ssm                      = var.endpoint
    resourcegroupstaggingapi = var.endpoint
  }
}

resource "aws_ssm_parameter" "a" {
  count          = 2
  name           = "/${var.prefix}/a${count.index}"
  type           = "String"
  insecure_value = "a"
}

resource "cdftest_thing" "wait" {
  name       = "wait"
  value      = "w"
  sleep_ms   = var.wait_ms
  depends_on = [aws_ssm_parameter.a]
}

resource "aws_ssm_parameter" "b" {
  count          = 2
  name           = "/${var.prefix}/b${count.index}"
  type           = "String"
  insecure_value = "b"
  depends_on     = [cdftest_thing.wait]
}
