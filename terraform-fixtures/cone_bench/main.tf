# B6's root (`make bench`): n aws_ssm_parameter of the real hashicorp/aws provider against moto,
# one of which (p[0]) a plan changes with `first`.
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
  type = number
}

variable "first" {
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
    ssm = var.endpoint
  }
}

resource "aws_ssm_parameter" "p" {
  count          = var.n
  name           = "/${var.prefix}/p${count.index}"
  type           = "String"
  insecure_value = count.index == 0 ? var.first : "v"
}
