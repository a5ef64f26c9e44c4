# `choudoufu-live run` serves the state; a plain-terraform test leaves this file out (local state).
terraform {
  backend "http" {}
}
