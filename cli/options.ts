// Parsers for the commands' option values, in commander's form: a bad value throws commander's
// InvalidArgumentError, which commander reports as a usage error naming the option.

import { InvalidArgumentError as OptionError } from 'commander'

/** A commander option parser for an integer ≥ `min`. */
export function integerAtLeast(min: number): (value: string) => number {
  return (value) => {
    const n = Number(value)
    if (!/^\s*\d+\s*$/.test(value) || !Number.isSafeInteger(n) || n < min) {
      throw new OptionError(`expected an integer ≥ ${min}`)
    }
    return n
  }
}

/** A commander option parser for one of `choices`. */
export function oneOf<T extends string>(choices: readonly T[]): (value: string) => T {
  return (value) => {
    if (!(choices as readonly string[]).includes(value)) {
      throw new OptionError(`expected one of ${choices.join(', ')}`)
    }
    return value as T
  }
}
