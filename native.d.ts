// Types of native.js (the addon loader): the generated binding's classes and interfaces.
export {
  NativeObjectStore,
  NativeShardReader,
  NativeShardWriter,
  NativeWalTailer,
  NativeWriteTicket,
} from './binding.js'
export type * from './binding.js'
