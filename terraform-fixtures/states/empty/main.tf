resource "terraform_data" "gone" {
  count = 2
  input = "gone-${count.index}"
}

output "constant" {
  value = "still-here"
}

output "gone_ids" {
  value = terraform_data.gone[*].id
}
