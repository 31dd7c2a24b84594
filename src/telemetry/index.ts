// Telemetry: the logger, the Prometheus registry with every gateway metric, bounded tenant labels.
export { logger, type Logger } from './logger.js';
export { registry, metrics, initialiseCounters, measureReplayHeld, detectorRan } from './metrics.js';
export { tenantLabel, setMaxTenantLabels, resetTenantLabels } from './tenant-label.js';
export {
  ledgerCredits,
  ledgerReadFailures,
  setLedgerTotals,
  isLedgerTotals,
  type LedgerTotals,
} from './ledger-credits.js';
export { captureNativeStderr, writeStderrJson } from './stderr.js';
export { writeStdoutLine, LOG_QUEUE_DEFAULT, LOG_QUEUE_MIN, LOG_QUEUE_MAX } from './stdout.js';
