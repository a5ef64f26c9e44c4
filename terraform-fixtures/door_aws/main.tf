# The provider door's root: the real hashicorp/aws provider (a filesystem mirror) against moto.
# Its value is insecure_value, so a plan shows which value it replaces (the races read it).
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

variable "n" {
  type    = number
  default = 1
}

variable "value" {
  type    = string
  default = "one"
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
  count          = var.n
  name           = "/${var.prefix}/p${count.index}"
  type           = "String"
  insecure_value = var.value
}
