module "net" {
  source = "./modules/net"
  count  = 2
  index  = count.index
}

resource "terraform_data" "root" {
  input = module.net[*].id
}

output "net_ids" {
  value = module.net[*].id
}

data "terraform_remote_state" "upstream" {
  backend = "local"
  config = {
    # the committed sibling fixture (generate "outputs" first)
    path = "${path.module}/../outputs.tfstate"
  }
  defaults = {
    greeting = "hello"
  }
}

output "remote_greeting" {
  value = data.terraform_remote_state.upstream.outputs.greeting
}

output "remote_str" {
  value = data.terraform_remote_state.upstream.outputs.str
}
