variable "gen" {
  type    = string
  default = "v1"
}

# Replaced (create_before_destroy) when var.gen changes. The creation-time
# provisioner fails for the "v2" object, so the new object is stored as a
# tainted current object and the old "v1" object is left behind as deposed.
# (A failing destroy-time provisioner does not work for this: Terraform does
# not run destroy-time provisioners for deposed objects.)
resource "terraform_data" "cbd" {
  input            = var.gen
  triggers_replace = var.gen

  lifecycle {
    create_before_destroy = true
  }

  provisioner "local-exec" {
    command = self.input == "v2" ? "echo failing on purpose && exit 1" : "true"
  }
}

# Marked tainted with `terraform taint`.
resource "terraform_data" "tainted" {
  input = "taint-me"
}

resource "terraform_data" "multi" {
  count = 2
  input = "multi-${count.index}"
}
