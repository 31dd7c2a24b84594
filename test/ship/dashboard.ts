// Test helper: the Grafana dashboard's queries, as the panels hold them.
import { readFileSync } from 'node:fs';

export const DASHBOARD = 'grafana/dashboards/speech-gateway.json';

interface Panel {
  title: string;
  type: string;
  targets?: Array<{ expr: string }>;
  panels?: Panel[];
}

/** Every query target of the dashboard, rows' nested panels included. */
export function dashboardQueries(): Array<{ panel: string; expr: string }> {
  const panels: Panel[] = JSON.parse(readFileSync(DASHBOARD, 'utf8')).panels;
  return panels
    .flatMap((p) => [p, ...(p.panels ?? [])])
    .flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })));
}

/** The query of the panel titled `title` (its one target). */
export function panelQuery(title: string): string {
  const found = dashboardQueries().filter((q) => q.panel === title);
  if (found.length !== 1) throw new Error(`${DASHBOARD}: ${found.length} queries in panel "${title}"`);
  return found[0].expr;
}
