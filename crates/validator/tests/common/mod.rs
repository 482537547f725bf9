//! What the node's integration tests share: a test policy, validators and agents on loopback.

#![allow(dead_code)] // each test file uses its own share of these

use pog_agent::agent::{self, Agent};
use pog_agent::misbehaviour::Cheat;
use pog_local::provers::CpuEngine;
use pog_net::serve::Limits;
use pog_proof::prover::Behaviour;
use pog_proof::wire::{kind, GpuClaim, Register};
use pog_records::{PlanKind, Policy};
use pog_signed::Identity;
use pog_spec::Precision;
use pog_validator::registry::Registry;
use pog_validator::validator::{Config, Validator};
use std::sync::Arc;

pub const VALIDATOR_SEED: [u8; 32] = [1; 32];

pub fn policy() -> Policy {
    Policy {
        plan: PlanKind::Test,
        precision: Some(Precision::Int8),
        size: 32,
        batch: 2,
        leaf_elements: 64,
        expected_ms: 2_000.0,
        samples: 256,
        expiry_ms: 10_000,
        memory: pog_records::MemoryPolicy::off(),
    }
}

/// A validator's configuration for loopback tests: agents listen on 127.0.0.1.
pub fn loopback() -> Config {
    Config {
        allow_private_endpoints: true,
        ..Config::default()
    }
}

pub fn claim(uuid: &str) -> GpuClaim {
    GpuClaim {
        uuid: uuid.parse().expect("a GPU UUID"),
        model: "H200 SXM".into(),
        bus_id: "0000:00:06.0".into(),
        simulated: false,
    }
}

pub async fn listen() -> (tokio::net::TcpListener, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    (listener, url)
}

/// Starts a validator; returns it and its URL.
pub async fn start_validator() -> (Arc<Validator>, String) {
    serve_validator(
        Validator::with_config(
            Identity::from_seed(VALIDATOR_SEED),
            Registry::open(None).unwrap(),
            loopback(),
        )
        .unwrap(),
    )
    .await
}

/// Serves `v`'s API on loopback; returns it and its URL.
pub async fn serve_validator(v: Validator) -> (Arc<Validator>, String) {
    let v = Arc::new(v);
    let (listener, url) = listen().await;
    tokio::spawn(pog_net::http::serve(
        listener,
        pog_validator::app::Api::of(v.clone()).router(),
        Limits::small_requests(),
    ));
    (v, url)
}

/// Starts an agent with its own key and these GPUs, registers it; returns its URL and the
/// registration's HTTP status.
pub async fn start_agent(
    validator_url: &str,
    seed: u8,
    gpus: Vec<GpuClaim>,
    behaviour: Behaviour,
    cheat: Option<Cheat>,
) -> (String, u16) {
    let registration_key = Identity::from_seed([seed; 32]);
    let agent = Arc::new(
        Agent::new(
            Identity::from_seed([seed; 32]),
            vec![Identity::from_seed(VALIDATOR_SEED).public_key()],
            gpus.clone(),
            Arc::new(CpuEngine {
                behaviour: Behaviour::Honest,
            }),
        )
        .misbehaving(behaviour, cheat),
    );
    assert_eq!(agent.public_key(), registration_key.public_key());
    let (listener, url) = listen().await;
    tokio::spawn(pog_net::http::serve(
        listener,
        agent::router(agent),
        Limits::protocol_messages(),
    ));
    let register = Register {
        endpoint: url.clone(),
        gpus,
    };
    let response = reqwest::Client::new()
        .post(format!("{validator_url}/v1/register"))
        .json(&registration_key.seal(kind::REGISTER, &register).unwrap())
        .send()
        .await
        .unwrap();
    (url, response.status().as_u16())
}

/// A raw TCP connection to `addr` from the loopback address `from` (127.0.0.0/8 is all
/// loopback on Linux: distinct sources without a network), with a receive buffer of
/// `recv_buffer` bytes when given (so the kernel takes little of what is sent to it).
pub fn connect_from(
    rt: &tokio::runtime::Runtime,
    from: [u8; 4],
    addr: std::net::SocketAddr,
    recv_buffer: Option<u32>,
) -> std::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    if let Some(bytes) = recv_buffer {
        socket.set_recv_buffer_size(bytes).unwrap();
    }
    socket
        .bind((std::net::Ipv4Addr::from(from), 0).into())
        .unwrap();
    let stream = rt
        .block_on(socket.connect(addr))
        .unwrap()
        .into_std()
        .unwrap();
    stream.set_nonblocking(false).unwrap();
    stream
}
