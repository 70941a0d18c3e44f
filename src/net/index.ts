export {
  inRanges,
  ipAddress,
  isLoopback,
  isPrivateAddress,
  LOOPBACK_RANGES,
  parseRange,
  PRIVATE_RANGES,
  rangeList,
  unmapped,
  type IpFamily,
  type IpRange,
} from './ip.js';
export { bracketed, comparableHost, hostEntry, splitHostPort, unbracketed } from './host.js';
