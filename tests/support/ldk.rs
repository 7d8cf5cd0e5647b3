//! The LDK side: a real `lightning::ln::peer_handler::PeerManager` driven by hand over
//! in-memory sockets, with handlers that record what LDK did and let a test make LDK send.
//!
//! Nothing here runs a thread or a timer: a test hands bytes to [`LdkNode::deliver`]
//! (`read_event`, then `process_events`) and takes LDK's replies with
//! [`MemSocket::take_sent`].

use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard};

use lightning::bitcoin::constants::ChainHash;
use lightning::bitcoin::secp256k1::PublicKey;
use lightning::io;
use lightning::ln::msgs::{
    self, BaseMessageHandler, ChannelMessageHandler, DecodeError, LightningError, MessageSendEvent,
    SocketAddress,
};
use lightning::ln::peer_handler::{
    CustomMessageHandler, ErroringMessageHandler, IgnoringMessageHandler, MessageHandler,
    PeerDetails, PeerHandleError, PeerManager, SocketDescriptor,
};
use lightning::ln::types::ChannelId;
use lightning::ln::wire::{CustomMessageReader, Type};
use lightning::sign::{KeysManager, NodeSigner, Recipient};
use lightning::types::features::{InitFeatures, NodeFeatures};
use lightning::util::logger::{Logger, Record};
use lightning::util::ser::{LengthLimitedRead, Writeable, Writer};

/// Type of the custom message [`Chatter`] sends and reads: odd (a peer that does not know
/// it must ignore it) and in BOLT 1's custom range (32768 and up).
pub const CHAT_TYPE: u16 = 40001;

/// Optional custom feature bit [`Chatter`] adds to LDK's `init`. Above 255, so LDK's
/// feature field is at least 33 bytes long.
pub const CHAT_FEATURE_BIT: usize = 257;

/// A fixed "now" for LDK's key manager and node announcements: tests are deterministic.
const START_SECS: u64 = 1_700_000_000;

/// Lock a mutex that only test code touches; a poisoned one means a test already failed.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().expect("a test panicked while holding the lock")
}

/// One end of an in-memory connection, as LDK sees it: `send_data` appends to a shared
/// buffer that the test drains, `disconnect_socket` is recorded.
#[derive(Clone)]
pub struct MemSocket {
    id: u64,
    state: Arc<Mutex<SocketState>>,
}

#[derive(Default)]
struct SocketState {
    sent: Vec<u8>,
    /// The last `continue_read` LDK gave was false: don't call `read_event` until it
    /// says otherwise.
    read_paused: bool,
    disconnected: bool,
}

impl MemSocket {
    fn new(id: u64) -> Self {
        MemSocket {
            id,
            state: Arc::default(),
        }
    }

    /// Everything LDK has sent since the last call.
    pub fn take_sent(&self) -> Vec<u8> {
        std::mem::take(&mut lock(&self.state).sent)
    }

    /// Whether LDK asked for reads to pause (its outbound queue is full).
    pub fn read_paused(&self) -> bool {
        lock(&self.state).read_paused
    }

    /// Whether LDK called `disconnect_socket`.
    pub fn disconnected(&self) -> bool {
        lock(&self.state).disconnected
    }
}

impl PartialEq for MemSocket {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}

impl Eq for MemSocket {}

impl Hash for MemSocket {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.id.hash(state);
    }
}

impl SocketDescriptor for MemSocket {
    fn send_data(&mut self, data: &[u8], continue_read: bool) -> usize {
        let mut state = lock(&self.state);
        state.read_paused = !continue_read;
        if state.disconnected {
            return 0;
        }
        state.sent.extend_from_slice(data);
        data.len()
    }

    fn disconnect_socket(&mut self) {
        lock(&self.state).disconnected = true;
    }
}

/// A logger that keeps LDK's lines in memory: [`LdkNode`] prints them to stderr only if
/// the test fails, and tests can look for the reason LDK gave for a disconnection.
#[derive(Default)]
pub struct CapturedLog {
    lines: Mutex<Vec<String>>,
}

impl CapturedLog {
    /// Whether any line contains `needle`.
    pub fn contains(&self, needle: &str) -> bool {
        lock(&self.lines).iter().any(|l| l.contains(needle))
    }

    fn dump(&self) {
        for line in lock(&self.lines).iter() {
            eprintln!("ldk: {line}");
        }
    }
}

impl Logger for CapturedLog {
    fn log(&self, record: Record) {
        let line = format!(
            "{:<5} {}:{} {}",
            record.level, record.module_path, record.line, record.args
        );
        lock(&self.lines).push(line);
    }
}

/// The custom message [`Chatter`] exchanges: type [`CHAT_TYPE`], an opaque payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chat(pub Vec<u8>);

impl Writeable for Chat {
    fn write<W: Writer>(&self, w: &mut W) -> Result<(), io::Error> {
        w.write_all(&self.0)
    }
}

impl Type for Chat {
    fn type_id(&self) -> u16 {
        CHAT_TYPE
    }
}

/// LDK's custom message handler in these tests: sends whatever a test queues with
/// [`Chatter::queue`], keeps every [`Chat`] it receives, and records connections.
#[derive(Default)]
pub struct Chatter {
    outbox: Mutex<Vec<(PublicKey, Chat)>>,
    inbox: Mutex<Vec<Chat>>,
    connected: Mutex<Vec<(PublicKey, bool)>>,
    disconnected: Mutex<Vec<PublicKey>>,
}

impl Chatter {
    /// Have LDK send `payload` to `peer` at its next `process_events`.
    pub fn queue(&self, peer: PublicKey, payload: Vec<u8>) {
        lock(&self.outbox).push((peer, Chat(payload)));
    }

    /// The chats received so far, in order.
    pub fn take_inbox(&self) -> Vec<Chat> {
        std::mem::take(&mut lock(&self.inbox))
    }

    /// Peers whose `init` LDK accepted, with whether the connection was inbound.
    pub fn connected(&self) -> Vec<(PublicKey, bool)> {
        lock(&self.connected).clone()
    }

    /// Peers LDK disconnected after accepting their `init`.
    pub fn disconnected(&self) -> Vec<PublicKey> {
        lock(&self.disconnected).clone()
    }
}

impl CustomMessageReader for Chatter {
    type CustomMessage = Chat;

    fn read<R: LengthLimitedRead>(
        &self,
        message_type: u16,
        buffer: &mut R,
    ) -> Result<Option<Chat>, DecodeError> {
        if message_type != CHAT_TYPE {
            return Ok(None);
        }
        let len =
            usize::try_from(buffer.remaining_bytes()).map_err(|_| DecodeError::InvalidValue)?;
        let mut payload = vec![0; len];
        buffer
            .read_exact(&mut payload)
            .map_err(|_| DecodeError::ShortRead)?;
        Ok(Some(Chat(payload)))
    }
}

impl CustomMessageHandler for Chatter {
    fn handle_custom_message(&self, msg: Chat, _sender: PublicKey) -> Result<(), LightningError> {
        lock(&self.inbox).push(msg);
        Ok(())
    }

    fn get_and_clear_pending_msg(&self) -> Vec<(PublicKey, Chat)> {
        std::mem::take(&mut lock(&self.outbox))
    }

    fn peer_disconnected(&self, their_node_id: PublicKey) {
        lock(&self.disconnected).push(their_node_id);
    }

    fn peer_connected(
        &self,
        their_node_id: PublicKey,
        _msg: &msgs::Init,
        inbound: bool,
    ) -> Result<(), ()> {
        lock(&self.connected).push((their_node_id, inbound));
        Ok(())
    }

    fn provided_node_features(&self) -> NodeFeatures {
        NodeFeatures::empty()
    }

    fn provided_init_features(&self, _their_node_id: PublicKey) -> InitFeatures {
        chat_features()
    }
}

/// The features [`Chatter`] adds to LDK's `init`: [`CHAT_FEATURE_BIT`], optional.
pub fn chat_features() -> InitFeatures {
    let mut features = InitFeatures::empty();
    features
        .set_optional_custom_bit(CHAT_FEATURE_BIT)
        .expect("257 is an odd bit in the custom range");
    features
}

/// LDK's `ErroringMessageHandler` (no channels; its feature set), except that it names
/// the chains LDK serves, which makes LDK send `networks` and check ours. With `None` it
/// behaves exactly like `ErroringMessageHandler`.
pub struct ChainScoped {
    inner: ErroringMessageHandler,
    chains: Option<Vec<ChainHash>>,
}

impl ChainScoped {
    fn new(chains: Option<Vec<ChainHash>>) -> Self {
        ChainScoped {
            inner: ErroringMessageHandler::new(),
            chains,
        }
    }
}

impl BaseMessageHandler for ChainScoped {
    fn get_and_clear_pending_msg_events(&self) -> Vec<MessageSendEvent> {
        BaseMessageHandler::get_and_clear_pending_msg_events(&self.inner)
    }
    fn peer_disconnected(&self, their_node_id: PublicKey) {
        BaseMessageHandler::peer_disconnected(&self.inner, their_node_id)
    }
    fn provided_node_features(&self) -> NodeFeatures {
        BaseMessageHandler::provided_node_features(&self.inner)
    }
    fn provided_init_features(&self, their_node_id: PublicKey) -> InitFeatures {
        BaseMessageHandler::provided_init_features(&self.inner, their_node_id)
    }
    fn peer_connected(
        &self,
        their_node_id: PublicKey,
        msg: &msgs::Init,
        inbound: bool,
    ) -> Result<(), ()> {
        BaseMessageHandler::peer_connected(&self.inner, their_node_id, msg, inbound)
    }
}

/// `fn name(&self, their_node_id, msg: $msg)` calling the same method of `self.inner`, for
/// each line. Calls are fully qualified: `ErroringMessageHandler` derefs to itself, which
/// sends method-call syntax into an endless auto-deref.
macro_rules! delegate_to_inner {
    ($($name:ident($msg:ty);)*) => {
        $(fn $name(&self, their_node_id: PublicKey, msg: $msg) {
            ChannelMessageHandler::$name(&self.inner, their_node_id, msg)
        })*
    };
}

impl ChannelMessageHandler for ChainScoped {
    delegate_to_inner! {
        handle_open_channel(&msgs::OpenChannel);
        handle_open_channel_v2(&msgs::OpenChannelV2);
        handle_accept_channel(&msgs::AcceptChannel);
        handle_accept_channel_v2(&msgs::AcceptChannelV2);
        handle_funding_created(&msgs::FundingCreated);
        handle_funding_signed(&msgs::FundingSigned);
        handle_channel_ready(&msgs::ChannelReady);
        handle_peer_storage(msgs::PeerStorage);
        handle_peer_storage_retrieval(msgs::PeerStorageRetrieval);
        handle_shutdown(&msgs::Shutdown);
        handle_closing_signed(&msgs::ClosingSigned);
        handle_stfu(&msgs::Stfu);
        handle_splice_init(&msgs::SpliceInit);
        handle_splice_ack(&msgs::SpliceAck);
        handle_splice_locked(&msgs::SpliceLocked);
        handle_tx_add_input(&msgs::TxAddInput);
        handle_tx_add_output(&msgs::TxAddOutput);
        handle_tx_remove_input(&msgs::TxRemoveInput);
        handle_tx_remove_output(&msgs::TxRemoveOutput);
        handle_tx_complete(&msgs::TxComplete);
        handle_tx_signatures(&msgs::TxSignatures);
        handle_tx_init_rbf(&msgs::TxInitRbf);
        handle_tx_ack_rbf(&msgs::TxAckRbf);
        handle_tx_abort(&msgs::TxAbort);
        handle_update_add_htlc(&msgs::UpdateAddHTLC);
        handle_update_fulfill_htlc(msgs::UpdateFulfillHTLC);
        handle_update_fail_htlc(&msgs::UpdateFailHTLC);
        handle_update_fail_malformed_htlc(&msgs::UpdateFailMalformedHTLC);
        handle_commitment_signed(&msgs::CommitmentSigned);
        handle_revoke_and_ack(&msgs::RevokeAndACK);
        handle_update_fee(&msgs::UpdateFee);
        handle_announcement_signatures(&msgs::AnnouncementSignatures);
        handle_channel_reestablish(&msgs::ChannelReestablish);
        handle_channel_update(&msgs::ChannelUpdate);
        handle_error(&msgs::ErrorMessage);
    }

    fn handle_commitment_signed_batch(
        &self,
        their_node_id: PublicKey,
        channel_id: ChannelId,
        batch: Vec<msgs::CommitmentSigned>,
    ) {
        ChannelMessageHandler::handle_commitment_signed_batch(
            &self.inner,
            their_node_id,
            channel_id,
            batch,
        )
    }

    fn get_chain_hashes(&self) -> Option<Vec<ChainHash>> {
        self.chains.clone()
    }

    fn message_received(&self) {
        ChannelMessageHandler::message_received(&self.inner)
    }
}

/// The `PeerManager` these tests run: no channels (but maybe a chain), no gossip, no onion
/// messages, [`Chatter`] for custom messages.
pub type LdkPeerManager = PeerManager<
    MemSocket,
    Arc<ChainScoped>,
    IgnoringMessageHandler,
    IgnoringMessageHandler,
    Arc<CapturedLog>,
    Arc<Chatter>,
    Arc<KeysManager>,
    IgnoringMessageHandler,
>;

/// One LDK node: its `PeerManager`, the handlers tests look into, and its node id.
pub struct LdkNode {
    pm: LdkPeerManager,
    /// The custom message handler: queue chats, read received ones, see connections.
    pub chatter: Arc<Chatter>,
    /// Everything LDK logged.
    pub log: Arc<CapturedLog>,
    node_id: PublicKey,
    next_socket: Mutex<u64>,
}

impl LdkNode {
    /// A node whose keys come from `seed`; `chains` as for [`ChainScoped`].
    pub fn new(seed: u8, chains: Option<Vec<ChainHash>>) -> Self {
        let keys = Arc::new(KeysManager::new(&[seed; 32], START_SECS, 0, true));
        let node_id = keys
            .get_node_id(Recipient::Node)
            .expect("KeysManager has a node key");
        let chatter = Arc::new(Chatter::default());
        let log = Arc::new(CapturedLog::default());
        let handlers = MessageHandler {
            chan_handler: Arc::new(ChainScoped::new(chains)),
            route_handler: IgnoringMessageHandler {},
            onion_message_handler: IgnoringMessageHandler {},
            custom_message_handler: Arc::clone(&chatter),
            send_only_message_handler: IgnoringMessageHandler {},
        };
        // Any 32 bytes do for LDK's ephemeral-key seed; distinct from the node seed.
        let ephemeral_seed = [seed ^ 0xa5; 32];
        let pm = PeerManager::new(
            handlers,
            u32::try_from(START_SECS).expect("fits"),
            &ephemeral_seed,
            Arc::clone(&log),
            keys,
        );
        LdkNode {
            pm,
            chatter,
            log,
            node_id,
            next_socket: Mutex::new(0),
        }
    }

    /// LDK's node id (its static Noise key).
    pub fn node_id(&self) -> PublicKey {
        self.node_id
    }

    /// The features LDK puts in its `init` with these handlers, as LDK computes them.
    pub fn expected_init_features(&self) -> InitFeatures {
        BaseMessageHandler::provided_init_features(&ErroringMessageHandler::new(), self.node_id)
            | chat_features()
    }

    fn new_socket(&self) -> MemSocket {
        let mut next = lock(&self.next_socket);
        *next += 1;
        MemSocket::new(*next)
    }

    /// A connection from a peer that dials LDK: LDK waits for act one.
    pub fn accept(&self) -> MemSocket {
        let socket = self.new_socket();
        self.pm
            .new_inbound_connection(socket.clone(), None)
            .expect("LDK accepts a new inbound connection");
        socket
    }

    /// LDK dials `their_node_id`; returns the socket and act one. `remote_address` is what
    /// LDK reports back in its `init` (`remote_addr`).
    pub fn dial(
        &self,
        their_node_id: PublicKey,
        remote_address: Option<SocketAddress>,
    ) -> (MemSocket, Vec<u8>) {
        let socket = self.new_socket();
        let act_one = self
            .pm
            .new_outbound_connection(their_node_id, socket.clone(), remote_address)
            .expect("LDK starts an outbound connection");
        (socket, act_one)
    }

    /// Hand LDK `bytes` as read from `socket`, in reads of at most `max_read` bytes (LDK
    /// asks for about 4 KiB per `read_event`), running `process_events` after each read so
    /// that LDK writes its replies. Honours LDK's request to pause reading. Stops at the
    /// first error, after which LDK has forgotten the connection.
    pub fn deliver(
        &self,
        socket: &mut MemSocket,
        bytes: &[u8],
        max_read: usize,
    ) -> Result<(), PeerHandleError> {
        for chunk in bytes.chunks(max_read.max(1)) {
            if socket.read_paused() {
                self.pm.process_events();
                assert!(!socket.read_paused(), "reads stay paused after a flush");
            }
            self.pm.read_event(socket, chunk)?;
            self.pm.process_events();
        }
        Ok(())
    }

    /// Let LDK send whatever its handlers queued.
    pub fn flush(&self) {
        self.pm.process_events();
    }

    /// LDK's view of the peer `node_id`, once the peer's `init` was accepted.
    pub fn peer(&self, node_id: &PublicKey) -> Option<PeerDetails> {
        self.pm.peer_by_node_id(node_id)
    }
}

impl Drop for LdkNode {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.log.dump();
        }
    }
}
