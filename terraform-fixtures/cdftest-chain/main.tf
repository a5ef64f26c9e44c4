# A chain of four things of the project's own provider: p1 → wait → p2 → wait → p3 → wait → p4.
# Each wait is the next thing's own create sleeping `wait_ms` before it writes its object
# (CDFTEST_OBJECTS), so a kill during a wait finds the earlier things made and the rest not.
terraform {
  required_providers {
    cdftest = {
      source  = "choudoufu/cdftest"
      version = "0.1.0"
    }
  }
}

variable "wait_ms" {
  type    = number
  default = 1500
}

resource "cdftest_thing" "p1" {
  name  = "p1"
  value = "one"
}

resource "cdftest_thing" "p2" {
  name       = "p2"
  value      = "two"
  sleep_ms   = var.wait_ms
  depends_on = [cdftest_thing.p1]
}

resource "cdftest_thing" "p3" {
  name       = "p3"
  value      = "three"
  sleep_ms   = var.wait_ms
  depends_on = [cdftest_thing.p2]
}

resource "cdftest_thing" "p4" {
  name       = "p4"
  value      = "four"
  sleep_ms   = var.wait_ms
  depends_on = [cdftest_thing.p3]
}
