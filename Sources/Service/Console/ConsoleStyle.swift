/// The console's style sheet: one column on a phone (375 px), tables becoming
/// labelled cards, and the same page spread out on a desktop (1440 px).
enum ConsoleStyle {
    static let css = #"""
    :root { --fg: #1b1f24; --muted: #5b6470; --line: #d8dde3; --bg: #f6f7f9; --card: #fff;
            --accent: #0b62d6; --ok: #1a7f37; --bad: #c62828; --wait: #9a6700; }
    * { box-sizing: border-box; }
    [hidden] { display: none !important; }
    html { -webkit-text-size-adjust: 100%; }
    body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
           color: var(--fg); background: var(--bg); }
    header { display: flex; flex-wrap: wrap; align-items: center; gap: 8px 24px; padding: 12px 20px;
             background: #111827; color: #fff; }
    header h1 { margin: 0; font-size: 18px; }
    header a { color: #fff; text-decoration: none; }
    nav { display: flex; flex-wrap: wrap; gap: 6px 16px; align-items: center; }
    nav a { color: #cfd8e3; }
    nav a:hover { color: #fff; }
    nav button { background: transparent; color: #cfd8e3; border: 1px solid #4b5563; }
    main { max-width: 1280px; margin: 0 auto; padding: 16px 20px 40px; }
    h2 { font-size: 20px; margin: 20px 0 8px; overflow-wrap: anywhere; }
    h3 { font-size: 16px; margin: 18px 0 6px; }
    a { color: var(--accent); overflow-wrap: anywhere; }
    form { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; }
    #signin-form { flex-direction: column; align-items: stretch; max-width: 420px; margin: 40px auto;
                   background: var(--card); padding: 20px; border: 1px solid var(--line); border-radius: 8px; }
    #signin-form h2 { margin-top: 0; }
    input, select, button { font: inherit; padding: 7px 10px; border: 1px solid var(--line); border-radius: 6px;
                            background: #fff; color: inherit; min-height: 36px; }
    input { min-width: 0; }
    #lookup-value { flex: 1 1 260px; }
    button { background: var(--accent); color: #fff; border-color: var(--accent); cursor: pointer; }
    button.secondary { background: #fff; color: var(--accent); }
    button:disabled { opacity: .6; cursor: default; }
    .error { color: var(--bad); min-height: 1.2em; margin: 8px 0; overflow-wrap: anywhere; }
    .muted { color: var(--muted); }
    .card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 12px 16px; margin: 12px 0; }
    .counts { display: flex; flex-wrap: wrap; gap: 8px 20px; }
    .count b { font-size: 20px; display: block; }
    .state-delivered, .active { color: var(--ok); font-weight: 600; }
    .state-failed, .inactive { color: var(--bad); font-weight: 600; }
    .state-pending { color: var(--wait); font-weight: 600; }
    code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 13px;
                  overflow-wrap: anywhere; }
    table { width: 100%; border-collapse: collapse; background: var(--card); border: 1px solid var(--line); }
    th, td { text-align: left; padding: 7px 10px; border-bottom: 1px solid var(--line); vertical-align: top; }
    th { font-size: 13px; color: var(--muted); font-weight: 600; background: #fbfcfd; }
    dl.prefs { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 0; }
    dl.prefs dt { color: var(--muted); }
    dl.prefs dd { margin: 0; overflow-wrap: anywhere; }
    .grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(280px, 1fr)); gap: 12px; }
    .test-result { margin-top: 6px; }
    .chart svg { width: 100%; height: 180px; display: block; }
    .chart .delivered { fill: none; stroke: var(--ok); stroke-width: 1.5; }
    .chart .failed { fill: none; stroke: var(--bad); stroke-width: 1.5; }
    .chart .axis { stroke: var(--line); stroke-width: 1; }
    .chart text { font-size: 11px; fill: var(--muted); }
    .bars .bar { fill: var(--bad); }
    .bars text { font-size: 12px; fill: var(--fg); }
    .legend { display: flex; gap: 16px; font-size: 13px; }
    .legend .ok { color: var(--ok); } .legend .bad { color: var(--bad); }
    .more { margin: 10px 0; }
    .waiting { display: block; font-size: 13px; color: var(--wait); }
    .state-cancelled, .state-superseded, .state-batched { color: var(--muted); font-weight: 600; }
    .state-scheduled { color: var(--wait); font-weight: 600; }
    dl.content { margin: 8px 0; }

    /* A phone: tables become one card per row, each cell labelled. */
    @media (max-width: 720px) {
      header { padding: 10px 12px; }
      main { padding: 12px 12px 32px; }
      table, thead, tbody, tr, th, td { display: block; }
      table { border: 0; background: transparent; }
      thead { display: none; }
      tr { background: var(--card); border: 1px solid var(--line); border-radius: 8px; margin: 0 0 10px; padding: 6px 0; }
      td { border: 0; padding: 3px 12px; display: grid; grid-template-columns: 7.5em 1fr; gap: 8px; }
      td::before { content: attr(data-label); color: var(--muted); font-size: 13px; }
      #lookup select, #lookup button { flex: 1 1 auto; }
    }
    """#
}
