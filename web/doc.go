// Package web embeds the dashboard and the browser client module.
package web
