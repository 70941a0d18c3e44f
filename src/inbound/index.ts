export { PeerTrust, isAddressOrRange, LOCAL_SOCKET, type TrustInbound } from './peer-trust.js';
export { InboundDeadlines, type InboundDeadlineOptions } from './inbound-deadlines.js';
export { installInboundTrust, inboundPeerOf, recordingInboundPeers, type InstalledInboundTrust } from './inbound-peers.js';
export { DEADLINE_HEADER, MESH_HEADERS } from './budget-headers.js';
