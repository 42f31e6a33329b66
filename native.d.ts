// Types of native.js (the addon loader): the generated binding's classes and interfaces.
export {
  NativeObjectStore,
  NativeShardReader,
  NativeShardWriter,
  NativeWalTailer,
  setNativeLogger,
  redactSecrets,
} from './binding.js'
export type * from './binding.js'
