# Resources for the claim tests of `choudoufu-live run`. Every provisioner is "the cloud":
# it appends `NAME start TIME VALUE` and `NAME end TIME` to calls_file, so tests count provider calls.
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

variable "one" {
  type    = string
  default = "v1"
}

variable "a" {
  type    = string
  default = "v1"
}

variable "b" {
  type    = string
  default = "v1"
}

variable "x" {
  type    = string
  default = "v1"
}

variable "y" {
  type    = string
  default = "v1"
}

variable "e" {
  type    = string
  default = "v1"
}

# Set at plan time, so terraform requires it again at apply time; never stored in the plan.
variable "tok" {
  type      = string
  default   = "none"
  ephemeral = true
}

variable "tok_file" {
  type    = string
  default = "/dev/null"
}

locals {
  call = "sleep ${var.sleep_seconds}"
}

resource "terraform_data" "one" {
  input            = var.one
  triggers_replace = var.one
  provisioner "local-exec" {
    command = "echo \"one start $(date +%s.%N) ${var.one}\" >> ${var.calls_file}; ${local.call}; echo \"one end $(date +%s.%N)\" >> ${var.calls_file}"
  }
}

resource "terraform_data" "a" {
  input            = var.a
  triggers_replace = var.a
  provisioner "local-exec" {
    command = "echo \"a start $(date +%s.%N) ${var.a}\" >> ${var.calls_file}; ${local.call}; echo \"a end $(date +%s.%N)\" >> ${var.calls_file}"
  }
}

resource "terraform_data" "b" {
  input            = var.b
  triggers_replace = var.b
  provisioner "local-exec" {
    command = "echo \"b start $(date +%s.%N) ${var.b}\" >> ${var.calls_file}; ${local.call}; echo \"b end $(date +%s.%N)\" >> ${var.calls_file}"
  }
}

output "ab_ids" {
  value = [terraform_data.a.id, terraform_data.b.id]
}

resource "terraform_data" "x" {
  input            = var.x
  triggers_replace = var.x
  provisioner "local-exec" {
    command = "echo \"x start $(date +%s.%N) ${var.x}\" >> ${var.calls_file}; ${local.call}; echo \"x end $(date +%s.%N)\" >> ${var.calls_file}"
  }
}

# y depends on x: a change of y while another run replaces x is refused before y's provisioner runs.
resource "terraform_data" "y" {
  input            = var.y
  triggers_replace = var.y
  depends_on       = [terraform_data.x]
  provisioner "local-exec" {
    command = "echo \"y start $(date +%s.%N) ${var.y}\" >> ${var.calls_file}; ${local.call}; echo \"y end $(date +%s.%N)\" >> ${var.calls_file}"
  }
}

resource "terraform_data" "e" {
  input            = var.e
  triggers_replace = var.e
  provisioner "local-exec" {
    command = "echo \"e start $(date +%s.%N) ${var.e}\" >> ${var.calls_file}; printf %s '${var.tok}' > ${var.tok_file}"
  }
}
