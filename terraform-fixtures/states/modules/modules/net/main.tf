variable "index" {
  type = number
}

resource "terraform_data" "net" {
  input = "net-${var.index}"
}

module "inner" {
  source   = "../inner"
  for_each = toset(["alpha", "beta"])
  name     = "${each.key}-${var.index}"
}

output "id" {
  value = terraform_data.net.id
}
