# Two aliases of the real hashicorp/aws provider (a filesystem mirror) in two regions, against moto:
# each alias is configured by terraform on a plugin of its own behind the provider door.
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

provider "aws" {
  alias                       = "east"
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

provider "aws" {
  alias                       = "west"
  region                      = "eu-west-1"
  access_key                  = "testing"
  secret_key                  = "testing"
  skip_credentials_validation = true
  skip_metadata_api_check     = true
  skip_requesting_account_id  = true
  endpoints {
    ssm = var.endpoint
  }
}

resource "aws_ssm_parameter" "east" {
  provider       = aws.east
  count          = 2
  name           = "/${var.prefix}/east${count.index}"
  type           = "String"
  insecure_value = "us-east-1"
}

resource "aws_ssm_parameter" "west" {
  provider       = aws.west
  count          = 2
  name           = "/${var.prefix}/west${count.index}"
  type           = "String"
  insecure_value = "eu-west-1"
}
