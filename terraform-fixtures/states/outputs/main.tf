variable "secret" {
  type      = string
  sensitive = true
  default   = "hunter2"
}

resource "terraform_data" "secret" {
  input = var.secret
}

resource "terraform_data" "plain" {
  input = {
    name  = "plain"
    count = 3
    tags  = ["a", "b"]
  }
}

output "str" {
  value = "hello"
}

output "num" {
  value = 42.5
}

output "bool" {
  value = true
}

output "list" {
  value = ["a", "b", 3]
}

output "map" {
  value = {
    a = "1"
    b = "2"
  }
}

output "object" {
  value = {
    name   = "x"
    nested = { n = 1, l = [true, false] }
  }
}

output "null" {
  value = null
}

output "secret" {
  value     = var.secret
  sensitive = true
}

output "resource_input" {
  value = terraform_data.plain.output
}
