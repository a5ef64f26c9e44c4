locals {
  keys = toset([
    "a/b/c",
    "..",
    "a\"b",
    "back\\slash",
    "with spaces in it",
    "zürich-东京",
    "dollar-$${not_interp}",
    "long-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
  ])
}

resource "terraform_data" "odd" {
  for_each = local.keys
  input    = each.key
}

resource "terraform_data" "by_map" {
  for_each = {
    "a/b" = 1
    ".."  = 2
  }
  input = each.value
}
