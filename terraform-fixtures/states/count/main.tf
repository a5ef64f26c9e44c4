resource "terraform_data" "counted" {
  count = 3
  input = "item-${count.index}"
}

resource "terraform_data" "single" {
  input = "single"
}
