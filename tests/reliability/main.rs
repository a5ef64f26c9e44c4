//! Load over time and kills at every step: `make test` runs their short versions, `make
//! reliability` their long ones (`--ignored`).

mod aws_kills;
mod kills;
mod load;
