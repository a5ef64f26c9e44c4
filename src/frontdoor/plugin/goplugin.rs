//! go-plugin's own services: Shutdown, the stdio stream and the broker, as a host expects them.

use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;
use tokio::sync::Notify;
use tonic::{Request, Response, Status, Streaming};

use super::proto::plugin::grpc_broker_server::GrpcBroker;
use super::proto::plugin::grpc_controller_server::GrpcController;
use super::proto::plugin::grpc_stdio_server::GrpcStdio;
use super::proto::plugin::{ConnInfo, Empty, StdioData};

/// A stream that stays open until the server stops.
type Open<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

/// `plugin.GRPCController`: the host's Shutdown.
#[derive(Debug, Clone)]
pub struct Controller {
    /// Told when the host asks the plugin to stop.
    pub stop: Arc<Notify>,
}

#[tonic::async_trait]
impl GrpcController for Controller {
    async fn shutdown(&self, _req: Request<Empty>) -> Result<Response<Empty>, Status> {
        tracing::info!("the host asked the plugin to shut down");
        self.stop.notify_one();
        Ok(Response::new(Empty {}))
    }
}

/// `plugin.GRPCStdio`: this plugin writes its logs to stderr itself, so the stream carries nothing.
#[derive(Debug, Clone, Default)]
pub struct Stdio;

#[tonic::async_trait]
impl GrpcStdio for Stdio {
    async fn stream_stdio(&self, _req: Request<()>) -> Result<Response<Open<StdioData>>, Status> {
        Ok(Response::new(Box::pin(futures::stream::pending())))
    }
}

/// `plugin.GRPCBroker`: this plugin opens no extra connections; the stream is kept open.
#[derive(Debug, Clone, Default)]
pub struct Broker;

#[tonic::async_trait]
impl GrpcBroker for Broker {
    async fn start_stream(
        &self,
        _req: Request<Streaming<ConnInfo>>,
    ) -> Result<Response<Open<ConnInfo>>, Status> {
        Ok(Response::new(Box::pin(futures::stream::pending())))
    }
}
