// The dashboard (placeholder).
