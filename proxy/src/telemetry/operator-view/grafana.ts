// Renders DASHBOARD_ROWS as a Grafana dashboard model (JSON), typed with Grafana's published schema
// types (@grafana/schema: the dashboard, and the time-series and stat panel options), so a field
// Grafana does not know is a compile error here. Imported only by generate.ts and tests: the
// sidecar never loads @grafana/schema (a development dependency).
import {
  AxisPlacement,
  BigValueColorMode,
  BigValueGraphMode,
  BigValueJustifyMode,
  BigValueTextMode,
  type Dashboard,
  type DataSourceRef,
  type FieldConfigSource,
  LegendDisplayMode,
  type Panel,
  type RowPanel,
  SortOrder,
  ThresholdsMode,
  TooltipDisplayMode,
  type VariableModel,
  VariableRefresh,
  VariableSort,
  VisibilityMode,
  VizOrientation,
} from '@grafana/schema';
import type { Options as StatOptions } from '@grafana/schema/dist/esm/raw/composable/stat/panelcfg/x/StatPanelCfg_types.gen';
import type {
  FieldConfig as TimeSeriesFieldConfig,
  Options as TimeSeriesOptions,
} from '@grafana/schema/dist/esm/raw/composable/timeseries/panelcfg/x/TimeSeriesPanelCfg_types.gen';
import { DASHBOARD_ROWS, DASHBOARD_TITLE, DASHBOARD_UID } from './dashboard.js';
import type { PanelSpec } from './model.js';

/**
 * The dashboard model version the JSON is written in: Grafana 11.0's. Newer Grafana releases
 * migrate it forward on load; older ones would not read a newer one.
 */
export const SCHEMA_VERSION = 39;

const GRID_WIDTH = 24;
const PANEL_HEIGHT = { timeseries: 8, stat: 4 } as const;
const DEFAULT_WIDTH = { timeseries: 8, stat: 6 } as const;
// biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's variable syntax, not a JS template
const DATASOURCE: DataSourceRef = { type: 'prometheus', uid: '${datasource}' };

const timeSeriesOptions: TimeSeriesOptions = {
  legend: { showLegend: true, displayMode: LegendDisplayMode.List, placement: 'bottom', calcs: [] },
  tooltip: { mode: TooltipDisplayMode.Multi, sort: SortOrder.Descending },
};

const statOptions: StatOptions = {
  colorMode: BigValueColorMode.Value,
  graphMode: BigValueGraphMode.Area,
  justifyMode: BigValueJustifyMode.Auto,
  textMode: BigValueTextMode.Auto,
  orientation: VizOrientation.Auto,
  reduceOptions: { calcs: ['lastNotNull'], fields: '', values: false },
  percentChangeColorMode: 'standard' as StatOptions['percentChangeColorMode'],
  showPercentChange: false,
  wideLayout: true,
};

// Panel options and field config are typed by panel kind above; the dashboard's own Panel type
// takes them as plain records (spread: an object literal type fits a record).
const timeSeriesCustom: TimeSeriesFieldConfig = { fillOpacity: 10, showPoints: VisibilityMode.Never };

const refId = (i: number) => String.fromCharCode(65 + i);

function thresholds(spec: PanelSpec): FieldConfigSource['defaults']['thresholds'] {
  if (spec.redBelow !== undefined) {
    return {
      mode: ThresholdsMode.Absolute,
      steps: [
        { color: 'red', value: null },
        { color: 'green', value: spec.redBelow },
      ],
    };
  }
  return {
    mode: ThresholdsMode.Absolute,
    steps: [
      { color: 'green', value: null },
      ...(spec.redFrom !== undefined ? [{ color: 'red', value: spec.redFrom }] : []),
    ],
  };
}

function panel(spec: PanelSpec, id: number, x: number, y: number): Panel {
  const targets = spec.queries.map((q, i) => ({
    refId: refId(i),
    datasource: DATASOURCE,
    expr: q.expr,
    legendFormat: q.legend,
    range: true,
  }));
  const common = {
    id,
    type: spec.kind,
    title: spec.title,
    description: spec.description,
    datasource: DATASOURCE,
    gridPos: { x, y, w: spec.width ?? DEFAULT_WIDTH[spec.kind], h: PANEL_HEIGHT[spec.kind] },
    targets,
  };
  if (spec.kind === 'stat') {
    return {
      ...common,
      options: { ...statOptions },
      fieldConfig: { defaults: { unit: spec.unit, thresholds: thresholds(spec) }, overrides: [] },
    };
  }
  return {
    ...common,
    options: { ...timeSeriesOptions },
    fieldConfig: {
      defaults: {
        unit: spec.unit,
        min: 0,
        custom: { ...timeSeriesCustom },
      },
      // A query in another unit than the panel's goes on a right-hand axis.
      overrides: spec.queries.flatMap((q, i) =>
        q.unit === undefined
          ? []
          : [
              {
                matcher: { id: 'byFrameRefID', options: refId(i) },
                properties: [
                  { id: 'unit', value: q.unit },
                  { id: 'custom.axisPlacement', value: AxisPlacement.Right },
                ],
              },
            ],
      ),
    },
  };
}

function variables(): VariableModel[] {
  return [
    {
      type: 'datasource',
      name: 'datasource',
      label: 'Data source',
      query: 'prometheus',
      hide: 0,
    },
    {
      type: 'query',
      name: 'job',
      label: 'Job',
      datasource: DATASOURCE,
      query: { query: 'label_values(walproxy_connections_active, job)', refId: 'job' },
      refresh: VariableRefresh.onTimeRangeChanged,
      sort: VariableSort.alphabeticalAsc,
      includeAll: true,
      multi: true,
      allValue: '.+',
    },
    {
      type: 'query',
      name: 'instance',
      label: 'Sidecar',
      datasource: DATASOURCE,
      query: { query: 'label_values(walproxy_connections_active{job=~"$job"}, instance)', refId: 'instance' },
      refresh: VariableRefresh.onTimeRangeChanged,
      sort: VariableSort.alphabeticalAsc,
      includeAll: true,
      multi: true,
      allValue: '.+',
    },
  ];
}

/** The dashboard model: one row panel per row, its panels laid out left to right, wrapping. */
export function grafanaDashboard(): Dashboard {
  const panels: Array<Panel | RowPanel> = [];
  let id = 1;
  let y = 0;
  for (const row of DASHBOARD_ROWS) {
    panels.push({
      type: 'row',
      id: id++,
      title: row.title,
      collapsed: false,
      gridPos: { x: 0, y, w: GRID_WIDTH, h: 1 },
      panels: [],
    });
    y += 1;
    let x = 0;
    let rowHeight = 0;
    for (const spec of row.panels) {
      const w = spec.width ?? DEFAULT_WIDTH[spec.kind];
      if (x + w > GRID_WIDTH) {
        x = 0;
        y += rowHeight;
        rowHeight = 0;
      }
      panels.push(panel(spec, id++, x, y));
      x += w;
      rowHeight = Math.max(rowHeight, PANEL_HEIGHT[spec.kind]);
    }
    y += rowHeight;
  }
  return {
    uid: DASHBOARD_UID,
    title: DASHBOARD_TITLE,
    description:
      'walproxy sidecars in front of Kafka brokers: traffic, replication by reference vs inline, the WAL store, follower fills, memory and cost. Generated by proxy/src/telemetry/operator-view (make docs).',
    tags: ['walproxy', 'kafka'],
    editable: true,
    graphTooltip: 1,
    schemaVersion: SCHEMA_VERSION,
    version: 1,
    refresh: '30s',
    time: { from: 'now-1h', to: 'now' },
    timepicker: {},
    timezone: 'browser',
    fiscalYearStartMonth: 0,
    liveNow: false,
    links: [],
    annotations: {
      list: [
        {
          builtIn: 1,
          datasource: { type: 'grafana', uid: '-- Grafana --' },
          enable: true,
          hide: true,
          iconColor: 'rgba(0, 211, 255, 1)',
          name: 'Annotations & Alerts',
          type: 'dashboard',
        },
      ],
    },
    templating: { list: variables() },
    panels,
  };
}
