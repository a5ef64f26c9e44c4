# Two resources of one root, each apply of which takes a while.
# The state is served per run by `choudoufu-live run` through this empty backend.
terraform {
  backend "http" {}
}

variable "db_version" {
  type    = string
  default = "v1"
}

variable "dns_version" {
  type    = string
  default = "v1"
}

variable "sleep_seconds" {
  type    = number
  default = 0
}

# A trace file where each provisioner notes when it ran (for the overlap proof).
variable "trace_file" {
  type    = string
  default = "/dev/null"
}

resource "terraform_data" "db" {
  input            = var.db_version
  triggers_replace = var.db_version
  provisioner "local-exec" {
    command = "echo \"db start $(date +%s.%N)\" >> ${var.trace_file}; sleep ${var.sleep_seconds}; echo \"db end $(date +%s.%N)\" >> ${var.trace_file}"
  }
}

resource "terraform_data" "dns" {
  input            = var.dns_version
  triggers_replace = var.dns_version
  provisioner "local-exec" {
    command = "echo \"dns start $(date +%s.%N)\" >> ${var.trace_file}; sleep ${var.sleep_seconds}; echo \"dns end $(date +%s.%N)\" >> ${var.trace_file}"
  }
}

# An optional third resource, for plans that create one.
variable "with_extra" {
  type    = bool
  default = false
}

resource "terraform_data" "extra" {
  count = var.with_extra ? 1 : 0
  input = "extra"
}
