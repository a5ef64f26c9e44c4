# Benchmark root of the provider door (B8): n things of the project's own provider
# (testprovider/, terraform-provider-cdftest), each applied by a provider call of its own.
terraform {
  backend "http" {}
  required_providers {
    cdftest = {
      source  = "choudoufu/cdftest"
      version = "0.1.0"
    }
  }
}

variable "n" {
  type    = number
  default = 10
}

variable "value" {
  type    = string
  default = "v1"
}

resource "cdftest_thing" "t" {
  count = var.n
  name  = "t${count.index}"
  value = var.value
}
