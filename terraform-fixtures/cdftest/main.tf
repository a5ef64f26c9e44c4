# Two things of the project's own provider (testprovider/, terraform-provider-cdftest): b depends
# on a. Each call is logged in CDFTEST_CALL_LOG; each thing is a file in CDFTEST_OBJECTS.
terraform {
  required_providers {
    cdftest = {
      source  = "choudoufu/cdftest"
      version = "0.1.0"
    }
  }
}

variable "a_name" {
  type    = string
  default = "a"
}

variable "a_value" {
  type    = string
  default = "v1"
}

variable "b_value" {
  type    = string
  default = "v1"
}

variable "b_sleep_ms" {
  type    = number
  default = 0
}

variable "b_fail" {
  type    = bool
  default = false
}

resource "cdftest_thing" "a" {
  name  = var.a_name
  value = var.a_value
}

resource "cdftest_thing" "b" {
  name     = "b"
  value    = "${var.b_value}-${cdftest_thing.a.id}"
  sleep_ms = var.b_sleep_ms
  fail     = var.b_fail
}
