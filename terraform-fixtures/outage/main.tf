# Resources for the outage tests of `choudoufu-live run`: a -> b -> c one after the other, and d
# on its own. Every provisioner is "the cloud": it appends `NAME start TIME VALUE` and
# `NAME end TIME` to calls_file, so a test knows when a resource is done.
terraform {
  backend "http" {}
}

variable "calls_file" {
  type    = string
  default = "/dev/null"
}

variable "sleep_seconds" {
  type    = number
  default = 0
}

variable "a" {
  type    = string
  default = "v1"
}

variable "b" {
  type    = string
  default = "v1"
}

variable "c" {
  type    = string
  default = "v1"
}

variable "d" {
  type    = string
  default = "v1"
}

resource "terraform_data" "a" {
  input            = var.a
  triggers_replace = var.a
  provisioner "local-exec" {
    command = "echo \"a start $(date +%s.%N) ${var.a}\" >> ${var.calls_file}; sleep ${var.sleep_seconds}; echo \"a end $(date +%s.%N)\" >> ${var.calls_file}"
  }
}

resource "terraform_data" "b" {
  input            = var.b
  triggers_replace = var.b
  depends_on       = [terraform_data.a]
  provisioner "local-exec" {
    command = "echo \"b start $(date +%s.%N) ${var.b}\" >> ${var.calls_file}; sleep ${var.sleep_seconds}; echo \"b end $(date +%s.%N)\" >> ${var.calls_file}"
  }
}

resource "terraform_data" "c" {
  input            = var.c
  triggers_replace = var.c
  depends_on       = [terraform_data.b]
  provisioner "local-exec" {
    command = "echo \"c start $(date +%s.%N) ${var.c}\" >> ${var.calls_file}; sleep ${var.sleep_seconds}; echo \"c end $(date +%s.%N)\" >> ${var.calls_file}"
  }
}

resource "terraform_data" "d" {
  input            = var.d
  triggers_replace = var.d
  provisioner "local-exec" {
    command = "echo \"d start $(date +%s.%N) ${var.d}\" >> ${var.calls_file}"
  }
}
