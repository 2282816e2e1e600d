// A2A message ids as the engine remembers them: scoped by the caller (see
// protocol/message-ids.ts, which the engine also reads them back with).
export { scopedMessageId, requesterMessageId as a2aMessageIdOf } from "../protocol/message-ids.js";
