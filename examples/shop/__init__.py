"""A small shop: orders become payments. Run it with `conveyor server --app shop.app:app`."""
