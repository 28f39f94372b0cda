package oauth

// SignForTest signs a JWT for the external tests (see signed).
var SignForTest = signed
