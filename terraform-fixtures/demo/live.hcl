# Read by choudoufu-live (stock terraform does not read this file).
live {
  estate = "demo"
  record_store "local" {
    path = ".live-records"
  }
}
