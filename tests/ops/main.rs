//! Operating an estate: the record commands, bucket safety and IAM, live markers on AWS.

mod bucket_iam;
mod markers_aws;
mod records_ops;
