// What only the team pages read of the JSON API's answers (server/routes.py lists the
// routes; the rows are store/queries.py's, the columns store/schema.py's).  The rows the
// notebook views or the Lab panel read too (clusters, computations, groups, failures,
// samples, events) are js/common/rows.ts's.

/** A stored report as a reader sees it (reports/rows.py public_row). */
export interface ReportRow {
  title: string | null;
  filename: string | null;
  user: string | null;
  created: number;
  private: boolean;
  summary: { duration?: number | null; n_tasks?: number | null } | null;
  url: string;
  json_url: string;
}

export interface Whoami {
  account: string | null;
  user: string | null;
  via: string;
  token_required: boolean;
}
