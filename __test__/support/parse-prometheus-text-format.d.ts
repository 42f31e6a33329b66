// Types of the parser the metrics test checks `writer.metrics()` with (the package ships none).
declare module 'parse-prometheus-text-format' {
  /** One sample of a family: a plain value, or a summary's quantiles, count and sum. */
  export interface ParsedMetric {
    value?: string
    labels?: Record<string, string>
    quantiles?: Record<string, string>
    count?: string
    sum?: string
  }
  /** One metric family. */
  export interface ParsedFamily {
    name: string
    help: string
    type: 'COUNTER' | 'GAUGE' | 'SUMMARY' | 'HISTOGRAM' | 'UNTYPED'
    metrics: ParsedMetric[]
  }
  /** Parses the Prometheus text exposition format; throws on malformed input. */
  export default function parsePrometheusTextFormat(text: string): ParsedFamily[]
}
