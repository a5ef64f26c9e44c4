# Kill rounds on a chained apply with the real hashicorp/aws provider (protocol 5): n SSM
# parameters a[*] holding `value`, and n more b[*] holding `value` and its a's ARN, so every change
# of `value` updates a[*] and then b[*], and every change of `n` creates or deletes both.
terraform {
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

variable "n" {
  type    = number
  default = 2
}

variable "value" {
  type    = string
  default = "v"
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
  count          = var.n
  name           = "/${var.prefix}/a${count.index}"
  type           = "String"
  insecure_value = var.value
}

resource "aws_ssm_parameter" "b" {
  count          = var.n
  name           = "/${var.prefix}/b${count.index}"
  type           = "String"
  insecure_value = "${var.value} after ${aws_ssm_parameter.a[count.index].arn}"
}
