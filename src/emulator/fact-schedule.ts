// When /streams in mode `facts` generates facts, in MEDIA seconds (mode.factGenerationInterval,
// docs/protocol.md '/streams configuration'). fixed: every 60 s. fast_init: 10, 20, 26, then
// intervals growing 14, 20 up to 60 s (10, 20, 26, 40, 60, 120, 180, ...); the upstream documents
// only "growing up to 60 s" after 26, so the rest is our choice.

const FAST_INIT = [10, 20, 26, 40, 60];

/** The first mark strictly after `after` seconds. */
export function nextFactMark(interval: string | undefined, after: number): number {
  if (interval === 'fast_init') {
    const early = FAST_INIT.find((m) => m > after);
    if (early !== undefined) return early;
  }
  return (Math.floor(after / 60) + 1) * 60;
}
