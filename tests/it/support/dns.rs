//! A DNS server for tests: hickory-server on `127.0.0.1:0`, answering A and AAAA queries
//! from a table the test controls, with TTL 0 so nothing is cached. Unknown names get
//! NXDOMAIN.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hickory_server::Server;
use hickory_server::net::runtime::Time;
use hickory_server::proto::op::{Metadata, ResponseCode};
use hickory_server::proto::rr::rdata::{A, AAAA};
use hickory_server::proto::rr::{RData, Record, RecordType};
use hickory_server::server::{Request, RequestHandler, ResponseHandler, ResponseInfo};
use hickory_server::zone_handler::MessageResponseBuilder;
use tokio::net::{TcpListener, UdpSocket};

/// The answers for one name: each query takes the next set, cycling (one set: always it).
type Table = Arc<Mutex<HashMap<String, (Vec<Vec<IpAddr>>, usize)>>>;

#[derive(Clone)]
struct Handler {
    table: Table,
}

#[async_trait::async_trait]
impl RequestHandler for Handler {
    async fn handle_request<R: ResponseHandler, T: Time>(
        &self,
        request: &Request,
        mut response: R,
    ) -> ResponseInfo {
        let builder = MessageResponseBuilder::from_message_request(request);
        let mut meta = Metadata::response_from_request(&request.metadata);
        meta.authoritative = true;
        let Some(query) = request.queries.queries().first() else {
            let msg = builder.error_msg(&request.metadata, ResponseCode::FormErr);
            return send(&mut response, msg, &request.metadata).await;
        };
        let name = query.name().to_string();
        let key = name.trim_end_matches('.').to_ascii_lowercase();
        let qtype = query.query_type();
        let answers = {
            let mut table = self.table.lock().unwrap();
            match table.get_mut(&key) {
                None => None,
                Some((sets, next)) => {
                    // Advance once per A query, so an A+AAAA pair sees the same set.
                    let set = sets[*next % sets.len()].clone();
                    if qtype == RecordType::A {
                        *next += 1;
                    }
                    Some(set)
                }
            }
        };
        let Some(addrs) = answers else {
            let msg = builder.error_msg(&request.metadata, ResponseCode::NXDomain);
            return send(&mut response, msg, &request.metadata).await;
        };
        let qname = query.original().name().clone();
        let records: Vec<Record> = addrs
            .iter()
            .filter_map(|ip| match (ip, qtype) {
                (IpAddr::V4(v4), RecordType::A) => {
                    Some(Record::from_rdata(qname.clone(), 0, RData::A(A(*v4))))
                }
                (IpAddr::V6(v6), RecordType::AAAA) => {
                    Some(Record::from_rdata(qname.clone(), 0, RData::AAAA(AAAA(*v6))))
                }
                _ => None,
            })
            .collect();
        let msg = builder.build(meta, records.iter(), [], [], []);
        send(&mut response, msg, &request.metadata).await
    }
}

async fn send<'a, R: ResponseHandler>(
    response: &mut R,
    msg: hickory_server::zone_handler::MessageResponse<
        '_,
        'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
    >,
    request: &Metadata,
) -> ResponseInfo {
    match response.send_response(msg).await {
        Ok(info) => info,
        Err(_) => {
            let mut metadata = Metadata::response_from_request(request);
            metadata.response_code = ResponseCode::ServFail;
            hickory_server::proto::op::Header {
                metadata,
                counts: Default::default(),
            }
            .into()
        }
    }
}

/// A running test DNS server. Dropping it stops it.
pub struct TestDns {
    /// Where it listens (UDP and TCP).
    pub addr: SocketAddr,
    table: Table,
    _server: Server<Handler>,
}

impl TestDns {
    /// Starts a server on `127.0.0.1:0` with an empty table.
    pub async fn start() -> Self {
        // A UDP port whose TCP twin is free too (another socket may hold it): retry.
        let mut attempt = 0;
        let (udp, tcp, addr) = loop {
            let udp = UdpSocket::bind("127.0.0.1:0").await.expect("bind udp");
            let addr = udp.local_addr().expect("udp addr");
            match TcpListener::bind(addr).await {
                Ok(tcp) => break (udp, tcp, addr),
                Err(e) if attempt < 50 => {
                    attempt += 1;
                    let _ = e;
                }
                Err(e) => panic!("no UDP port with a free TCP twin: {e}"),
            }
        };
        let table: Table = Arc::default();
        let mut server = Server::new(Handler {
            table: table.clone(),
        });
        server.register_socket(udp);
        server.register_listener(tcp, Duration::from_secs(5), 4096);
        Self {
            addr,
            table,
            _server: server,
        }
    }

    /// Answers `name` with `addrs` (A and AAAA, TTL 0).
    pub fn set(&self, name: &str, addrs: &[&str]) {
        self.set_sequence(name, &[addrs]);
    }

    /// Answers successive queries for `name` with each set in turn, cycling (DNS rebinding).
    pub fn set_sequence(&self, name: &str, sets: &[&[&str]]) {
        let sets = sets
            .iter()
            .map(|s| s.iter().map(|a| a.parse().expect("test address")).collect())
            .collect();
        self.table
            .lock()
            .unwrap()
            .insert(name.to_ascii_lowercase(), (sets, 0));
    }

    /// The `[resolver]` table pointing at this server.
    pub fn resolver_toml(&self) -> String {
        format!(
            "[resolver]\nnameservers = [\"{}\"]\ntimeout_ms = 2000\nattempts = 2\n",
            self.addr
        )
    }
}
