# Pairs of objects of one type created in one apply, told apart only by what their plans know:
# a fixed name and a name prefix, tags and none, attached and not. The real hashicorp/aws
# provider (a filesystem mirror) against moto; each live object's tofu-address is read back
# with boto3 and must name the address terraform saved it under.
terraform {
  backend "http" {}
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "5.100.0"
    }
  }
}

variable "endpoint" {
  type = string
}

variable "prefix" {
  type = string
}

# Which pairs the root holds: s3, sqs, sg (two groups, and an ingress and an egress rule without
# tags on the named one), eip, igw, iam, order (a named bucket that waits on a prefixed one);
# and kms (two keys, which a destroy leaves pending deletion: not in the default set).
variable "kinds" {
  type    = set(string)
  default = ["s3", "sqs", "sg", "eip", "igw", "iam", "order"]
}

provider "aws" {
  region                      = "us-east-1"
  access_key                  = "testing"
  secret_key                  = "testing"
  skip_credentials_validation = true
  skip_metadata_api_check     = true
  skip_requesting_account_id  = true
  s3_use_path_style           = true
  endpoints {
    s3                       = var.endpoint
    sqs                      = var.endpoint
    ec2                      = var.endpoint
    iam                      = var.endpoint
    kms                      = var.endpoint
    sts                      = var.endpoint
    resourcegroupstaggingapi = var.endpoint
  }
  default_tags {
    tags = {
      owner = "tests"
    }
  }
}

locals {
  s3  = contains(var.kinds, "s3") ? 1 : 0
  sqs = contains(var.kinds, "sqs") ? 1 : 0
  sg  = contains(var.kinds, "sg") ? 1 : 0
  eip = contains(var.kinds, "eip") ? 1 : 0
  igw = contains(var.kinds, "igw") ? 1 : 0
  iam = contains(var.kinds, "iam") ? 1 : 0
  kms = contains(var.kinds, "kms") ? 1 : 0
  ord = contains(var.kinds, "order") ? 1 : 0
  vpc = max(local.sg, local.igw)
}

resource "aws_s3_bucket" "named" {
  count  = local.s3
  bucket = "${var.prefix}-named"
}

resource "aws_s3_bucket" "prefixed" {
  count         = local.s3
  bucket_prefix = "${var.prefix}-p-"
}

resource "aws_sqs_queue" "named" {
  count = local.sqs
  name  = "${var.prefix}-named"
}

resource "aws_sqs_queue" "prefixed" {
  count       = local.sqs
  name_prefix = "${var.prefix}-p-"
}

resource "aws_vpc" "v" {
  count      = local.vpc
  cidr_block = "10.40.0.0/16"
}

resource "aws_security_group" "named" {
  count  = local.sg
  name   = "${var.prefix}-named"
  vpc_id = aws_vpc.v[0].id
}

resource "aws_security_group" "prefixed" {
  count       = local.sg
  name_prefix = "${var.prefix}-p-"
  vpc_id      = aws_vpc.v[0].id
}

# Plugin-framework rules without `tags`: the door's markers must leave their `tags` null.
resource "aws_vpc_security_group_ingress_rule" "https" {
  count             = local.sg
  security_group_id = aws_security_group.named[0].id
  cidr_ipv4         = "10.0.0.0/8"
  ip_protocol       = "tcp"
  from_port         = 443
  to_port           = 443
}

resource "aws_vpc_security_group_egress_rule" "all" {
  count             = local.sg
  security_group_id = aws_security_group.named[0].id
  cidr_ipv4         = "0.0.0.0/0"
  ip_protocol       = "-1"
}

resource "aws_eip" "tagged" {
  count  = local.eip
  domain = "vpc"
  tags = {
    role = "tagged"
  }
}

resource "aws_eip" "untagged" {
  count  = local.eip
  domain = "vpc"
}

resource "aws_internet_gateway" "attached" {
  count  = local.igw
  vpc_id = aws_vpc.v[0].id
}

resource "aws_internet_gateway" "detached" {
  count = local.igw
}

resource "aws_iam_policy" "named" {
  count  = local.iam
  name   = "${var.prefix}-named"
  policy = jsonencode({ Version = "2012-10-17", Statement = [{ Effect = "Allow", Action = "s3:ListBucket", Resource = "*" }] })
}

resource "aws_iam_policy" "prefixed" {
  count       = local.iam
  name_prefix = "${var.prefix}-p-"
  policy      = jsonencode({ Version = "2012-10-17", Statement = [{ Effect = "Allow", Action = "s3:ListBucket", Resource = "*" }] })
}

# Keys have no name: a destroy schedules their deletion, and they stay listed, marked, for the
# deletion window.
resource "aws_kms_key" "named" {
  count                   = local.kms
  description             = "${var.prefix}-named"
  deletion_window_in_days = 7
}

resource "aws_kms_key" "prefixed" {
  count                   = local.kms
  description             = "${var.prefix}-p-"
  deletion_window_in_days = 7
}

# A named bucket that waits on a prefixed one: the prefixed bucket's call comes first and alone,
# and a match that let a null or an unknown agree with anything would give it the named
# bucket's change, whose address sorts first.
resource "aws_s3_bucket" "lead" {
  count      = local.ord
  bucket     = "${var.prefix}-lead"
  depends_on = [aws_s3_bucket.trail]
}

resource "aws_s3_bucket" "trail" {
  count         = local.ord
  bucket_prefix = "${var.prefix}-t-"
}
