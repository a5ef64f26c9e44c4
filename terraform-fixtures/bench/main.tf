# Benchmark root: n terraform_data resources; `first` changes only r[0].
terraform {
  backend "http" {}
}

variable "n" {
  type    = number
  default = 10
}

variable "first" {
  type    = string
  default = "a"
}

resource "terraform_data" "r" {
  count = var.n
  input = count.index == 0 ? var.first : "value-${count.index}"
}
