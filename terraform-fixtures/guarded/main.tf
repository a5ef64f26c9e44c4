# A root whose apply waits in a provisioner until the test says go: a window in which
# another client tries the run's state server. The provisioner writes the environment
# terraform gave it (it holds the run's credentials) to env_file.
terraform {
  backend "http" {}
}

variable "secret" {
  type      = string
  default   = "not-set"
  sensitive = true
}

variable "wait" {
  type    = bool
  default = false
}

variable "env_file" {
  type    = string
  default = "/dev/null"
}

variable "go_file" {
  type    = string
  default = "/nonexistent"
}

resource "terraform_data" "seed" {
  input = var.secret
}

resource "terraform_data" "waiter" {
  count = var.wait ? 1 : 0
  input = "waited"
  provisioner "local-exec" {
    command = "env > ${var.env_file}.tmp && mv ${var.env_file}.tmp ${var.env_file}; for i in $(seq 1200); do [ -e ${var.go_file} ] && exit 0; sleep 0.05; done; exit 1"
  }
}
