variable "name" {
  type = string
}

resource "terraform_data" "inner" {
  input = var.name
}

output "id" {
  value = terraform_data.inner.id
}
