// Test support: a gateway's Prometheus metrics, read from its /metrics as Prometheus would.

/** Where the gateway (or replica) whose admin port is `port` serves /metrics: the host:port a
 *  Prometheus scrape target names. Every test reaches /metrics through it. */
export function metricsTarget(port: number): string {
  return `127.0.0.1:${port}`;
}

/** The value of `series` on the gateway (or replica) whose admin port is `port`, 0 when it has no such
 *  sample. `series` is a metric name with its labels as the gateway writes them
 *  (`speech_gateway_hops_total{result="opened"}`), or a name alone: the sum over its label sets. */
export async function metric(port: number, series: string): Promise<number> {
  const text = await (await fetch(`http://${metricsTarget(port)}/metrics`)).text();
  return text
    .split('\n')
    .filter((l) => l.startsWith(`${series} `) || (!series.includes('{') && l.startsWith(`${series}{`)))
    .reduce((n, l) => n + Number(l.split(' ').at(-1)), 0);
}
