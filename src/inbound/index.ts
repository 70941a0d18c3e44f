export { PeerTrust, isAddressOrRange, LOCAL_SOCKET, type TrustInbound } from './peer-trust.js';
export { DEFAULT_MAX_INBOUND_MS, InboundDeadlines, type InboundDeadlineOptions } from './inbound-deadlines.js';
export { installInboundTrust, inboundPeerOf, recordingInboundPeers } from './inbound-peers.js';
export { BUDGET_HEADERS, DEADLINE_HEADER } from './budget-headers.js';
